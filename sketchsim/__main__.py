from sketchsim.cli import main

main()
